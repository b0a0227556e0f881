"""Persistence: models, engine, unit of work, repositories."""
