package core

import (
	"errors"
	"fmt"
)

// Domain errors. Backends wrap them with context (fmt.Errorf("...: %w", ErrX));
// the HTTP layer maps them to status codes in one place.
var (
	// ErrNoSuchImage: no local image matches the given name or ID (404).
	ErrNoSuchImage = errors.New("no such image")
	// ErrNoSuchContainer: no container matches the given name or ID (404).
	ErrNoSuchContainer = errors.New("no such container")
	// ErrNoSuchPod: no pod matches the given name or ID (404).
	ErrNoSuchPod = errors.New("no such pod")
	// ErrNoSuchExecSession: no exec session has the given ID (404).
	ErrNoSuchExecSession = errors.New("no such exec session")
	// ErrNoSuchPath: a path does not exist in a container's filesystem, or
	// on the engine host for the local APIs (local load and build) (404).
	ErrNoSuchPath = errors.New("no such file or directory")
	// ErrNoSuchManifestList: no local manifest list has the given name, or
	// the list has no instance with the given digest (404).
	ErrNoSuchManifestList = errors.New("no such manifest list")
	// ErrNoSuchArtifact: no artifact has the given name or digest, or the
	// artifact has no file with the given title or digest (404).
	ErrNoSuchArtifact = errors.New("no such artifact")
	// ErrNameInUse: the requested name already belongs to another object (409).
	ErrNameInUse = errors.New("name is in use")
	// ErrStateConflict: the object is in a state that does not allow the operation (409).
	ErrStateConflict = errors.New("object state does not allow this operation")
	// ErrImageInUse: an image is used by a container and cannot be removed without force (409).
	ErrImageInUse = errors.New("image is in use by a container")
	// ErrInvalidArgument: a request parameter is malformed or out of range (400).
	// Wrap it with the field name: InvalidArgument("reference", err).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrNotModified: the object is already in the requested state (304).
	ErrNotModified = errors.New("not modified")
	// ErrAmbiguous: a short ID prefix matches several objects (409, as Podman answers).
	ErrAmbiguous = errors.New("more than one result for the given name or ID prefix")
	// ErrTooLarge: a request body, or what it expands to, exceeds the engine's limit (413).
	ErrTooLarge = errors.New("request too large")
)

// FieldError is an ErrInvalidArgument that names the offending field.
type FieldError struct {
	Field string
	Err   error
}

// InvalidArgument wraps err as an ErrInvalidArgument about field.
func InvalidArgument(field string, err error) error {
	return &FieldError{Field: field, Err: err}
}

// Error reads "invalid <field>: <reason>".
func (e *FieldError) Error() string {
	if e.Err == nil {
		return "invalid " + e.Field
	}
	return "invalid " + e.Field + ": " + e.Err.Error()
}

// Unwrap exposes the reason.
func (e *FieldError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrInvalidArgument) true for every FieldError.
func (e *FieldError) Is(target error) bool { return target == ErrInvalidArgument }

// NoSuchContainer is a container lookup of nameOrID that found nothing, in
// Podman's words (its clients print them; "no such container" is the cause
// they match).
func NoSuchContainer(nameOrID string) error {
	return fmt.Errorf("no container with name or ID %q found: %w", nameOrID, ErrNoSuchContainer)
}
