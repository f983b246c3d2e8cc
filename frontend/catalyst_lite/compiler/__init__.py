"""From a traced program to what runs: which program a call takes, specialization, compilation
(README.md's module map and docs/architecture.md describe each module)."""
