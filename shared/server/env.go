package server

// EnvOr returns getenv(key) when it is set and not empty, else fallback. It
// gives flags their defaults from the environment without reading a global.
func EnvOr(getenv func(string) string, key, fallback string) string {
	if getenv == nil {
		return fallback
	}
	if value := getenv(key); value != "" {
		return value
	}
	return fallback
}
