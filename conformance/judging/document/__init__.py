"""The document: loaded, corrected, validated against, and what binds the target."""
