"""Claim verification pipeline: types, tools the agents call, evidence memory, runner, methods."""
