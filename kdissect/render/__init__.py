"""Output for people (rich text) and programs (JSON)."""
