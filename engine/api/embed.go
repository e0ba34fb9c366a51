// Package api holds the engine's OpenAPI document, embedded so that a freshly
// built binary serves it where no installed copy exists.
package api

import _ "embed"

// Swagger is the engine's OpenAPI document (swagger.yaml beside this file).
//
//go:embed swagger.yaml
var Swagger []byte
