"""Statistics over evaluation results: significance tests and rank correlation
(:mod:`.significance`), pooling strategies and assessor agreement (:mod:`.pooling`)."""
