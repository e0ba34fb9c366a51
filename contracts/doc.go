// Package contracts pins the HTTP contract between berth-uploads (consumer)
// and berth-engine (provider) with Pact.
//
// The consumer tests drive uploads/engineclient against the Pact mock server
// and write pacts/berth-uploads-berth-engine.json; the provider test builds
// and starts a real berth-engine and verifies that file against it, setting
// up every provider state through the engine's own API. See
// docs/contracts.md for running them and publishing to a Pact Broker.
package contracts
