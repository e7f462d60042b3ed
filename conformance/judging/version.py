"""The suite's version, written into every report (a leaf: every layer may read it)."""

VERSION = "0.1.0"
