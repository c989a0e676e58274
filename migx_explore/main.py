"""Model Explorer's entry into this package: `model-explorer FILE --extensions=migx_explore`
imports `<extension>.main` and registers the Adapter classes it defines (see
migx_explore/model_explorer/adapter.py). Nothing else imports this module."""

from migx_explore.model_explorer.adapter import MigxExploreAdapter

__all__ = ["MigxExploreAdapter"]
