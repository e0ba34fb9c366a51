package core

import (
	"errors"
	"fmt"
)

// Domain errors. Backends wrap them with context (fmt.Errorf("...: %w", ErrX));
// the HTTP layer maps them to status codes in one place.
//
// Their texts are Podman's words, written once here: Podman's clients and
// users match on them (the bindings' errorhandling.Contains, podman rm/rmi
// --ignore, scripts grepping "no such container"), and the libpod answer
// carries the innermost one as its cause. The Docker front door words the
// not-found ones Docker's way (NotFoundError).
var (
	// ErrNoSuchImage: no local image matches the given name or ID (404);
	// containers/storage's words.
	ErrNoSuchImage = errors.New("image not known")
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
	// the list has no instance with the given digest (404). Podman looks
	// lists up as images: its words are the image's.
	ErrNoSuchManifestList = errors.New("image not known")
	// ErrNoSuchArtifact: no artifact has the given name or digest, or the
	// artifact has no file with the given title or digest (404).
	ErrNoSuchArtifact = errors.New("artifact does not exist")
	// ErrNameInUse: the requested name already belongs to another object (409).
	// Each kind answers in its own words: ErrPodExists, ErrVolumeExists,
	// ErrDuplicateName, ErrSecretExists, ErrNetworkExists match it.
	ErrNameInUse = errors.New("name is in use")
	// ErrStateConflict: the object is in a state that does not allow the operation (409).
	ErrStateConflict = errors.New("object state does not allow this operation")
	// ErrImageInUse: an image is used by a container and cannot be removed without force (409).
	ErrImageInUse = errors.New("image is in use by a container")
	// ErrInvalidArgument: a request parameter is malformed or out of range (400).
	// Wrap it with the field name: InvalidArgument("reference", err).
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrLogsNotKept: the container's log driver keeps no log to read
	// (none) (501, as dockerd answers).
	ErrLogsNotKept = errors.New("this container is not logging output")
	// ErrNotModified: the object is already in the requested state (304).
	ErrNotModified = errors.New("not modified")
	// ErrAmbiguous: a short ID prefix matches several objects (409, as Podman answers).
	ErrAmbiguous = errors.New("more than one result for the given name or ID prefix")
	// ErrTooLarge: a request body, or what it expands to, exceeds the engine's limit (413).
	ErrTooLarge = errors.New("request too large")
	// ErrUnauthorized: a registry refused the credentials a client gave
	// (401, as dockerd answers a failed login).
	ErrUnauthorized = errors.New("unauthorized")
)

// The name-in-use errors of each kind, in Podman's words (409).
var (
	// ErrPodExists: a pod of the requested name exists.
	ErrPodExists error = nameInUseError("pod already exists")
	// ErrVolumeExists: a volume of the requested name exists.
	ErrVolumeExists error = nameInUseError("volume already exists")
	// ErrDuplicateName: a container or image of the requested name exists
	// (containers/storage's words, which Podman answers for both).
	ErrDuplicateName error = nameInUseError("that name is already in use")
	// ErrSecretExists: a secret of the requested name exists.
	ErrSecretExists error = nameInUseError("secret name in use")
)

// nameInUseError is an ErrNameInUse with words of its own.
type nameInUseError string

func (e nameInUseError) Error() string { return string(e) }

// Is makes errors.Is(err, ErrNameInUse) true.
func (e nameInUseError) Is(target error) bool { return target == ErrNameInUse }

// NotFoundError is a lookup of Name that found nothing. errors.Is matches
// Kind (ErrNoSuchContainer, ErrNoSuchImage ...), which gives the 404 and
// the cause; the text is Podman's message for the kind, which podman
// prints; the Docker front door words it Docker's way from Kind and Name.
type NotFoundError struct {
	Kind error
	Name string
}

// Error is Podman's message for the kind.
func (e *NotFoundError) Error() string {
	switch e.Kind {
	case ErrNoSuchContainer:
		return fmt.Sprintf("no container with name or ID %q found: %v", e.Name, e.Kind)
	case ErrNoSuchPod:
		return fmt.Sprintf("no pod with name or ID %s found: %v", e.Name, e.Kind)
	case ErrNoSuchVolume:
		return fmt.Sprintf("no volume with name %q found: %v", e.Name, e.Kind)
	case ErrNoSuchNetwork:
		return fmt.Sprintf("unable to find network with name or ID %s: %v", e.Name, e.Kind)
	case ErrNoSuchSecret:
		return fmt.Sprintf("no secret with name or id %q: %v", e.Name, e.Kind)
	}
	return fmt.Sprintf("%s: %v", e.Name, e.Kind)
}

// Unwrap exposes the kind.
func (e *NotFoundError) Unwrap() error { return e.Kind }

// NoSuchContainer is a container lookup of nameOrID that found nothing.
func NoSuchContainer(nameOrID string) error {
	return &NotFoundError{Kind: ErrNoSuchContainer, Name: nameOrID}
}

// NoSuchImage is an image lookup of nameOrID that found nothing.
func NoSuchImage(nameOrID string) error { return &NotFoundError{Kind: ErrNoSuchImage, Name: nameOrID} }

// NoSuchPod is a pod lookup of nameOrID that found nothing.
func NoSuchPod(nameOrID string) error { return &NotFoundError{Kind: ErrNoSuchPod, Name: nameOrID} }

// NoSuchVolume is a volume lookup of name that found nothing.
func NoSuchVolume(name string) error { return &NotFoundError{Kind: ErrNoSuchVolume, Name: name} }

// NoSuchNetwork is a network lookup of nameOrID that found nothing.
func NoSuchNetwork(nameOrID string) error {
	return &NotFoundError{Kind: ErrNoSuchNetwork, Name: nameOrID}
}

// NoSuchSecret is a secret lookup of nameOrID that found nothing.
func NoSuchSecret(nameOrID string) error {
	return &NotFoundError{Kind: ErrNoSuchSecret, Name: nameOrID}
}

// NoSuchManifestList is a manifest list lookup of name that found nothing.
func NoSuchManifestList(name string) error {
	return &NotFoundError{Kind: ErrNoSuchManifestList, Name: name}
}

// NoSuchArtifact is an artifact lookup of nameOrDigest that found nothing.
func NoSuchArtifact(nameOrDigest string) error {
	return &NotFoundError{Kind: ErrNoSuchArtifact, Name: nameOrDigest}
}

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
