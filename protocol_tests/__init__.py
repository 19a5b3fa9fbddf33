"""Raw-protocol tests against a running kafkalite broker (a package, so its helper modules
`raw_client` and `batches` never collide with same-named modules of other test dirs)."""
