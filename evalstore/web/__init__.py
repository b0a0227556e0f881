"""The HTTP service: a JSON API under ``/api/v1`` (FastAPI on uvicorn). Routes check the caller's
role and hand everything else to the services, as the CLI does."""
