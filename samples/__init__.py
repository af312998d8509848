"""The shipped sample sources (manifests, licences, images): package data, read with importlib.resources."""
