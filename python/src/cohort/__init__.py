"""Cohort from Python: the kvstore of a Cohort job (cohort.kvstore) and, for PyTorch scripts,
cohort.torch. Import it from the build output: PYTHONPATH=bazel-bin/python.

    import cohort
    kv = cohort.kvstore.create("dist_sync")     # the job the launcher describes
"""

from cohort._cohort import Error
from cohort import kvstore

__all__ = ["Error", "kvstore"]
