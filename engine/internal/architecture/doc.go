// Package architecture holds no code: its test keeps the engine's floors
// (docs/engine/architecture.md) by reading every package's imports and
// refusing one that reaches up a floor.
package architecture
