"""Serving: start/stop vLLM (server.py), talk to any OpenAI-compatible endpoint (client.py)."""
