"""completions-conformance: contract tests for OpenAI-compatible ``POST /v1/completions``.

The package holds the core (spec model, cases, client, SSE reader, checks and the
requirement registry), the pytest plugin, the suite that ``pytest conformance`` collects,
and the embedded reference target. See ARCHITECTURE.md for the layers.
"""

__version__ = "0.1.0"
