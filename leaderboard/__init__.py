"""The Streamlit leaderboard, its submissions queue and results store."""
