// Placeholder: filled in by the engine-v2 work (issue 8).
