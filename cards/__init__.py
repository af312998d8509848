"""Dataset card templates (Jinja2), one shared and one per benchmark; rendered by builders.card."""
