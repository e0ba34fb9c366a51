package handlers

import (
	"errors"
	"net/http"

	"github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/berth-project/berth/engine/internal/core"
)

// artifactInspect is InspectArtifact's answer and one entry of
// ListArtifact's (Podman 6's client reads each entry's Digest; Podman 5's
// list had none).
type artifactInspect struct {
	Manifest imgspecv1.Manifest `json:"Manifest"`
	Name     string             `json:"Name"`
	Digest   string             `json:"Digest"`
}

// artifactDigestReport answers add, pull and push.
type artifactDigestReport struct {
	ArtifactDigest *digest.Digest `json:"ArtifactDigest"`
}

// artifactRemoveReport answers the removals.
type artifactRemoveReport struct {
	ArtifactDigests []*digest.Digest `json:"ArtifactDigests"`
}

func digestReport(d string) artifactDigestReport {
	parsed := digest.Digest(d)
	return artifactDigestReport{ArtifactDigest: &parsed}
}

func artifactRemovedReport(digests []string) artifactRemoveReport {
	out := artifactRemoveReport{ArtifactDigests: []*digest.Digest{}}
	for _, d := range digests {
		parsed := digest.Digest(d)
		out.ArtifactDigests = append(out.ArtifactDigests, &parsed)
	}
	return out
}

// listArtifacts is ListArtifact.
func (s *Server) listArtifacts(w http.ResponseWriter, r *http.Request) {
	artifacts, err := s.deps.Artifacts.List(r.Context())
	out := make([]artifactInspect, 0, len(artifacts))
	for _, a := range artifacts {
		out = append(out, artifactInspect{Manifest: a.Manifest, Name: a.Name, Digest: a.Digest})
	}
	finishJSON(w, http.StatusOK, out, err)
}

// inspectArtifact is InspectArtifact.
func (s *Server) inspectArtifact(w http.ResponseWriter, r *http.Request) {
	a, err := s.deps.Artifacts.Inspect(r.Context(), pathParam(r, "name"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, artifactInspect{Manifest: a.Manifest, Name: a.Name, Digest: a.Digest})
}

// artifactAddQuery is the query of AddArtifact and AddLocalArtifact.
type artifactAddQuery struct {
	Name             string   `query:"name"`
	FileName         string   `query:"fileName"`
	FileMIMEType     string   `query:"fileMIMEType"`
	Annotations      []string `query:"annotations"`
	ArtifactMIMEType string   `query:"artifactMIMEType"`
	Append           bool     `query:"append"`
	Replace          bool     `query:"replace"`
	Path             string   `query:"path"`
}

// decodeArtifactAdd reads an add's query into options.
func decodeArtifactAdd(r *http.Request) (core.ArtifactAddOptions, string, error) {
	var q artifactAddQuery
	if err := decodeQuery(r, &q); err != nil {
		return core.ArtifactAddOptions{}, "", err
	}
	annotations, err := parseAnnotations("annotations", q.Annotations)
	if err != nil {
		return core.ArtifactAddOptions{}, "", err
	}
	if q.Name == "" {
		return core.ArtifactAddOptions{}, "", core.InvalidArgument("name", errors.New("the artifact name is required"))
	}
	return core.ArtifactAddOptions{
		Name:             q.Name,
		FileName:         q.FileName,
		FileMIMEType:     q.FileMIMEType,
		Annotations:      annotations,
		ArtifactMIMEType: q.ArtifactMIMEType,
		Append:           q.Append,
		Replace:          q.Replace,
	}, q.Path, nil
}

// addArtifact is AddArtifact: the body is the file.
func (s *Server) addArtifact(w http.ResponseWriter, r *http.Request) {
	opts, path, err := decodeArtifactAdd(r)
	if err == nil && path != "" {
		err = core.InvalidArgument("path", errors.New("path is for /artifacts/local/add; here the body is the file"))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := s.deps.Artifacts.Add(r.Context(), opts, r.Body)
	answerArtifactDigest(w, http.StatusCreated, d, err)
}

// addLocalArtifact is AddLocalArtifact: the file is on the engine's host.
func (s *Server) addLocalArtifact(w http.ResponseWriter, r *http.Request) {
	opts, path, err := decodeArtifactAdd(r)
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := s.deps.Artifacts.AddLocal(r.Context(), opts, path)
	answerArtifactDigest(w, http.StatusCreated, d, err)
}

func answerArtifactDigest(w http.ResponseWriter, status int, d string, err error) {
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, status, digestReport(d))
}

// removeArtifact is RemoveArtifact.
func (s *Server) removeArtifact(w http.ResponseWriter, r *http.Request) {
	removed, err := s.deps.Artifacts.Remove(r.Context(), []string{pathParam(r, "name")}, core.ArtifactRemoveOptions{})
	finishJSON(w, http.StatusOK, artifactRemovedReport(removed), err)
}

// removeArtifacts is BatchRemoveArtifact.
func (s *Server) removeArtifacts(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Artifacts []string `query:"artifacts"`
		All       bool     `query:"all"`
		Ignore    bool     `query:"ignore"`
	}{}
	if !queryInto(w, r, &q) {
		return
	}
	removed, err := s.deps.Artifacts.Remove(r.Context(), q.Artifacts, core.ArtifactRemoveOptions{All: q.All, Ignore: q.Ignore})
	finishJSON(w, http.StatusOK, artifactRemovedReport(removed), err)
}

// extractArtifact is ExtractArtifact: a tar of the artifact's files.
func (s *Server) extractArtifact(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Title        string `query:"title"`
		Digest       string `query:"digest"`
		ExcludeTitle bool   `query:"excludetitle"`
	}{}
	if !queryInto(w, r, &q) {
		return
	}
	write, err := s.deps.Artifacts.Extract(r.Context(), pathParam(r, "name"),
		core.ArtifactExtractOptions{Title: q.Title, Digest: q.Digest, ExcludeTitle: q.ExcludeTitle})
	if err != nil {
		writeError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	if err := write(w); err != nil {
		s.logger.Warn("artifact extraction interrupted", "error", err)
	}
}

// artifactTransferQuery reads retry, retryDelay, tlsVerify and X-Registry-Auth.
func artifactTransferQuery(r *http.Request, dst any) (core.ArtifactTransferOptions, error) {
	values := foldQuery(r)
	if err := decodeValues(values, dst); err != nil {
		return core.ArtifactTransferOptions{}, err
	}
	q := struct {
		Retry      uint64 `query:"retry"`
		RetryDelay string `query:"retrydelay"`
	}{}
	if err := decodeValues(values, &q); err != nil {
		return core.ArtifactTransferOptions{}, err
	}
	tlsVerify, auth, err := registryQuery(r)
	if err != nil {
		return core.ArtifactTransferOptions{}, err
	}
	opts := core.ArtifactTransferOptions{TLSVerify: tlsVerify, Auth: auth, RetryDelay: q.RetryDelay}
	if _, set := values["retry"]; set {
		retry := uint(q.Retry)
		opts.Retry = &retry
	}
	return opts, nil
}

// pullArtifact is PullArtifact.
func (s *Server) pullArtifact(w http.ResponseWriter, r *http.Request) {
	q := struct {
		Name string `query:"name"`
	}{}
	opts, err := artifactTransferQuery(r, &q)
	if err == nil && q.Name == "" {
		err = core.InvalidArgument("name", errors.New("the artifact reference is required"))
	}
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := s.deps.Artifacts.Pull(r.Context(), q.Name, opts)
	answerArtifactDigest(w, http.StatusOK, d, err)
}

// pushArtifact is PushArtifact: to the registry the artifact's name names.
func (s *Server) pushArtifact(w http.ResponseWriter, r *http.Request) {
	opts, err := artifactTransferQuery(r, &struct{}{})
	if err != nil {
		writeError(w, err)
		return
	}
	d, err := s.deps.Artifacts.Push(r.Context(), pathParam(r, "name"), opts)
	answerArtifactDigest(w, http.StatusOK, d, err)
}
