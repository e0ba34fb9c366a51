// Package store keeps the metadata of uploads (state, processing progress, error entries
// and usage counters) in SQLite or PostgreSQL. Both speak the same SQL through
// database/sql; the few differences live in a dialect.
package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Status is the state of an upload: open -> pending -> processing -> done.
type Status string

// The states of an upload.
const (
	StatusOpen       Status = "open"
	StatusPending    Status = "pending"
	StatusProcessing Status = "processing"
	StatusDone       Status = "done"
	// StatusDeleting is the tombstone of an upload whose deletion began: the API and the
	// workers no longer see it, and whoever finds it (the DELETE request, or any
	// replica's sweep after a crash) removes its tree and then its rows.
	StatusDeleting Status = "deleting"
)

// Statuses lists every state in lifecycle order.
var Statuses = []Status{StatusOpen, StatusPending, StatusProcessing, StatusDone}

// Upload is the metadata of one upload.
type Upload struct {
	ID        uuid.UUID
	Status    Status
	CreatedAt time.Time
	UpdatedAt time.Time
	// FilesTotal is nil until processing has counted the files.
	FilesTotal     *int
	FilesProcessed int
	Errors         int
	// Images counts the image names recorded as deployed.
	Images int
	// Bytes and Files are the current usage, checked against the upload limits.
	Bytes int64
	Files int
	// UsageGen counts the changes booked by Mutate; files.Tree uses it to find a change
	// whose process died between changing the tree and booking the change.
	UsageGen int64
	// Attempts counts consecutive processing attempts that stopped on an unavailable
	// deploy target; it drives the retry backoff.
	Attempts int
}

// FileError is the error entry of one file that could not be processed.
type FileError struct {
	File    string `json:"file"`
	Message string `json:"message"`
}

// DeployedImage is one image name that deploying a file of an upload loaded.
type DeployedImage struct {
	File string `json:"file"`
	Name string `json:"name"`
}

// Errors of the store; the API maps them to status codes.
var (
	ErrNotFound = errors.New("upload not found")
	// ErrState is wrapped by *StateError.
	ErrState = errors.New("operation not allowed in the upload's state")
	// ErrLostClaim: another worker owns the upload now (or it was deleted).
	ErrLostClaim = errors.New("processing claim lost")
)

// StateError reports an operation refused in the upload's current state.
type StateError struct {
	Status  Status
	Allowed []Status
}

func (e *StateError) Error() string {
	allowed := make([]string, len(e.Allowed))
	for i, s := range e.Allowed {
		allowed[i] = string(s)
	}
	return fmt.Sprintf("upload is %s; allowed only when %s", e.Status, strings.Join(allowed, " or "))
}

// Unwrap makes errors.Is(err, ErrState) true.
func (e *StateError) Unwrap() error { return ErrState }

// CheckState returns a *StateError unless u is in one of the allowed states.
func CheckState(u Upload, allowed ...Status) error {
	if slices.Contains(allowed, u.Status) {
		return nil
	}
	return &StateError{Status: u.Status, Allowed: allowed}
}

// Usage is what an upload's files take: their bytes and their number.
type Usage struct {
	Bytes int64
	Files int
}

// Store is the metadata of uploads.
type Store interface {
	Create(ctx context.Context) (Upload, error)
	// Insert creates an open upload with the given id (its tree is made first, so that
	// no row ever lacks its tree).
	Insert(ctx context.Context, id uuid.UUID) (Upload, error)
	// Get returns an upload; ErrNotFound when unknown or being deleted.
	Get(ctx context.Context, id uuid.UUID) (Upload, error)
	// List returns one page of uploads, oldest first, and the total count (uploads
	// being deleted are left out).
	List(ctx context.Context, limit, offset int) ([]Upload, int, error)
	// Delete removes the rows of the upload (its error entries and deployed images
	// too), whatever its state; an unknown id is not an error. Its tree must be gone.
	Delete(ctx context.Context, id uuid.UUID) error
	// Tombstone moves the upload to StatusDeleting (see there); found is false for an
	// unknown id. It waits for a Mutate of the upload in progress.
	Tombstone(ctx context.Context, id uuid.UUID) (found bool, err error)
	// Deleting lists up to limit tombstoned uploads, oldest first.
	Deleting(ctx context.Context, limit int) ([]uuid.UUID, error)
	// Lookup returns the rows of those ids that exist, tombstones included.
	Lookup(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]Upload, error)
	// MarkForProcessing moves an open upload to pending. It waits for a Mutate of the
	// upload in progress, so every change of the tree booked before is seen by
	// processing and every later one is refused.
	MarkForProcessing(ctx context.Context, id uuid.UUID) (Upload, error)
	// Mutate runs fn under the upload's lock, which every replica sharing the database
	// shares (a row lock in PostgreSQL; SQLite's write lock, for every process of the
	// host), with the upload as booked. The usage fn returns is booked with UsageGen one
	// higher in the same transaction: the lock is released only once the change is
	// booked (or, when fn fails, nothing is). fn sees the upload's state and refuses
	// what that state does not allow; an unknown upload, or one being deleted, is
	// ErrNotFound without calling fn.
	Mutate(ctx context.Context, id uuid.UUID, fn func(u Upload) (Usage, error)) error
	// Errors returns one page of the error entries of a processing or done upload.
	Errors(ctx context.Context, id uuid.UUID, limit, offset int) ([]FileError, int, error)
	// Images returns one page of the deployed image names of a processing or done
	// upload, in file order, and their total count.
	Images(ctx context.Context, id uuid.UUID, limit, offset int) ([]DeployedImage, int, error)
	// CountByStatus and TotalBytes feed the metrics.
	CountByStatus(ctx context.Context) (map[Status]int, error)
	TotalBytes(ctx context.Context) (int64, error)

	// Claim atomically takes one pending upload, or a processing one whose lease ran out
	// (its worker died or backed off), for owner until now+lease. ok is false when there
	// is nothing to do.
	Claim(ctx context.Context, owner string, lease time.Duration) (u Upload, ok bool, err error)
	// SetTotal records the number of files once, right after the first claim.
	SetTotal(ctx context.Context, id uuid.UUID, owner string, total int) error
	// RecordFile marks file number index as finished, with its error entry if any and
	// the image names it deployed, in one transaction, and extends the lease. It fails
	// with ErrLostClaim unless owner holds the claim and index files were done before.
	RecordFile(ctx context.Context, id uuid.UUID, owner string, index int, entry *FileError, images []DeployedImage, lease time.Duration) error
	// Renew extends the lease of a claim.
	Renew(ctx context.Context, id uuid.UUID, owner string, lease time.Duration) error
	// Release gives a claim up until retryAt, counting one more failed attempt.
	Release(ctx context.Context, id uuid.UUID, owner string, retryAt time.Time) error
	// Finish moves a claimed upload to done.
	Finish(ctx context.Context, id uuid.UUID, owner string) error

	Ping(ctx context.Context) error
	Close() error
}
