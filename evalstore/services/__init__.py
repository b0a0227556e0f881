"""The service layer: the only code that opens transactions. CLI, worker and MLflow call it."""
