// Package e2e runs berth-engine and berth-uploads as containers (the images
// `make images` builds) with testcontainers-go and checks the system from the
// outside: uploads deploy image archives into the engine, survive an engine
// restart, and both are scraped by a real Prometheus.
package e2e
