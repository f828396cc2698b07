// Package deploy holds no code: it is where the packaging of SPEC 10
// lives, next to the tests that keep it working without a container
// runtime. The Dockerfile (at the repository root), deploy/compose,
// deploy/kubernetes, deploy/grafana and deploy/prometheus are checked by
// the parsers and loaders of the tools that consume them: the Kubernetes
// API types, the Compose specification's loader, the PromQL parser, and
// our own configuration validation; and every metric they name is checked
// against what a running aggregator exposes.
package deploy
