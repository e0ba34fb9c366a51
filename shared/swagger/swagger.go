// Package swagger serves the engine's OpenAPI document.
package swagger

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/berth-project/berth/shared/apierror"
)

// DefaultEngineSwaggerSpec is where `make install` puts the engine's OpenAPI
// document and where the engine looks for it unless told otherwise.
const DefaultEngineSwaggerSpec = "/usr/share/containers/berth/swagger.yaml"

// ServeSwagger returns a handler that serves the document at specPath when
// that file is readable, and otherwise the copy embedded in the binary, so a
// freshly built binary answers too. The file is read on every request, so an
// installed update is served without a restart. Only when neither the file
// nor an embedded copy is there does it answer 500 with an engine error.
//
// The document is sent as application/yaml, or application/json when it is a
// JSON document; HEAD, conditional and range requests work as for any file.
func ServeSwagger(specPath string, embedded []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		content, modTime, readErr := readSpec(specPath)
		if readErr != nil {
			if len(embedded) == 0 {
				apierror.WriteEngine(w, http.StatusInternalServerError,
					fmt.Errorf("no swagger document: none embedded and %w", readErr))
				return
			}
			content, modTime = embedded, time.Time{}
		}
		w.Header().Set("Content-Type", contentType(content))
		http.ServeContent(w, r, "swagger.yaml", modTime, bytes.NewReader(content))
	}
}

// readSpec reads the document at specPath; an empty path, a directory and an
// empty file count as no document.
func readSpec(specPath string) ([]byte, time.Time, error) {
	if specPath == "" {
		return nil, time.Time{}, errors.New("no swagger file configured")
	}
	file, err := os.Open(specPath)
	if err != nil {
		return nil, time.Time{}, err
	}
	defer file.Close()
	info, err := file.Stat()
	if err != nil {
		return nil, time.Time{}, err
	}
	if info.IsDir() {
		return nil, time.Time{}, fmt.Errorf("swagger file %s is a directory", specPath)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(file); err != nil {
		return nil, time.Time{}, fmt.Errorf("read swagger file: %w", err)
	}
	if buf.Len() == 0 {
		return nil, time.Time{}, fmt.Errorf("swagger file %s is empty", specPath)
	}
	return buf.Bytes(), info.ModTime(), nil
}

// contentType tells a JSON document from YAML by its first non-blank byte.
func contentType(content []byte) string {
	trimmed := bytes.TrimLeft(content, " \t\r\n")
	if len(trimmed) > 0 && trimmed[0] == '{' {
		return "application/json"
	}
	return "application/yaml"
}
