"""The local Pulsar lab: a real Pulsar 4.0 standalone assembled from Maven Central jars
(`runtime`, `localpulsar`) and the demo workloads that run on it (`demo`). Used by
`pulsar-lens pulsar|demo` and the live tests; never by the collectors that talk to a user's
cluster."""
