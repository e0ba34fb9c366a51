package containers

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/containers/storage"
	"github.com/containers/storage/pkg/idtools"
	storagetypes "github.com/containers/storage/types"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/berth-project/berth/engine/internal/backend/execution/oci"
	"github.com/berth-project/berth/engine/internal/backend/execution/seccomp"
	"github.com/berth-project/berth/engine/internal/backend/platform/apparmor"
	"github.com/berth-project/berth/engine/internal/backend/platform/userns"
	"github.com/berth-project/berth/engine/internal/core"
)

// inlineSeccomp is the profile path of a container whose profile came as
// text (Docker's API).
const inlineSeccomp = "inline"

// imageSeccompLabel is the image label holding a seccomp profile, applied
// with seccomp_policy "image" (Podman's).
const imageSeccompLabel = "io.containers.seccomp.profile"

// resolveSeccomp reads the container's own seccomp profile, if it has one:
// the file the request names, or with policy "image" the image's label.
// It is read once, at create, and kept with the container (nil: the
// engine's default profile or none, as the spec says).
func resolveSeccomp(s *core.ContainerSpec, img *core.Image, host oci.Host) (json.RawMessage, error) {
	if s.SeccompProfilePath == seccomp.Unconfined {
		return nil, nil
	}
	if s.SeccompProfileText != "" {
		if err := seccomp.Check([]byte(s.SeccompProfileText)); err != nil {
			return nil, core.InvalidArgument("HostConfig.SecurityOpt", fmt.Errorf("seccomp profile: %w", err))
		}
		// Kept as the container's own profile, as a file's text is;
		// inspect names it "inline".
		text := s.SeccompProfileText
		s.SeccompProfilePath, s.SeccompProfileText = inlineSeccomp, ""
		return json.RawMessage(text), nil
	}
	if oci.CustomSeccompProfile(s) {
		data, err := seccomp.LoadFile(s.SeccompProfilePath)
		if err != nil {
			return nil, core.InvalidArgument("seccomp_profile_path", err)
		}
		if !host.Seccomp {
			return nil, core.InvalidArgument("seccomp_profile_path", fmt.Errorf("%s: the kernel has no seccomp filters", s.SeccompProfilePath))
		}
		return data, nil
	}
	if s.SeccompPolicy == core.SeccompPolicyImage && img != nil {
		if label := img.Config.Config.Labels[imageSeccompLabel]; label != "" {
			if err := seccomp.Check([]byte(label)); err != nil {
				return nil, core.InvalidArgument("seccomp_policy", fmt.Errorf("the image's %s label: %w", imageSeccompLabel, err))
			}
			return json.RawMessage(label), nil
		}
	}
	return nil, nil
}

// apparmorProfile chooses the container's AppArmor profile: none where the
// host does not enforce AppArmor (asking for a profile there is refused,
// never ignored), else the engine's default, unless the request says
// unconfined (or is privileged: then "unconfined") or names another loaded
// profile.
func (m *Manager) apparmorProfile(s *core.ContainerSpec) (string, error) {
	p := s.ApparmorProfile
	if !m.apparmor.Enabled {
		if p != "" && p != apparmor.Unconfined {
			return "", core.InvalidArgument("apparmor_profile", fmt.Errorf("%q: AppArmor is not enabled on this host", p))
		}
		return "", nil
	}
	switch {
	case p == apparmor.Unconfined || (p == "" && s.Privileged):
		// Named, so that the runtime moves the process to unconfined (as
		// Docker and Podman write it): with no profile it would keep the
		// runtime binary's own, which Debian 13's AppArmor 4 has ("runc",
		// in unconfined mode there, but a profile all the same).
		return apparmor.Unconfined, nil
	case p == "":
		return apparmor.DefaultProfile, nil
	}
	loaded, err := m.apparmor.Loaded(p)
	if err != nil {
		return "", err
	}
	if !loaded {
		return "", core.InvalidArgument("apparmor_profile", fmt.Errorf("profile %q is not loaded (apparmor_parser loads profiles)", p))
	}
	return p, nil
}

// securityOpts are the --security-opt values that describe the container's
// confinement, as Podman's inspect lists them in HostConfig.SecurityOpt.
func securityOpts(s *core.ContainerSpec) []string {
	opts := []string{}
	if s.NoNewPrivs {
		opts = append(opts, "no-new-privileges")
	}
	if s.ApparmorProfile != "" {
		opts = append(opts, "apparmor="+s.ApparmorProfile)
	}
	if s.SeccompProfilePath != "" && s.SeccompProfilePath != seccomp.PodmanDefaultPath {
		opts = append(opts, "seccomp="+s.SeccompProfilePath)
	}
	for _, p := range s.Mask {
		opts = append(opts, "mask="+p)
	}
	for _, p := range s.Unmask {
		opts = append(opts, "unmask="+p)
	}
	return opts
}

// seccompProfilePath is what inspect reports as the container's profile:
// "unconfined", the file it was created with, or the engine's default.
func (m *Manager) seccompProfilePath(rec *record) string {
	switch {
	case oci.SeccompUnconfined(&rec.Spec, m.host):
		return seccomp.Unconfined
	case oci.CustomSeccompProfile(&rec.Spec):
		return rec.Spec.SeccompProfilePath
	case rec.SeccompProfile != nil:
		return "image:" + imageSeccompLabel
	}
	return m.seccompDefault
}

// idMappings chooses the storage's ID mapping options for the request's
// user namespace: none (the host's), an automatic range of the engine's
// subordinate IDs that containers/storage allocates, or explicit maps,
// which must lie in those ranges and outside every other container's.
// Callers hold m.idMu until the storage container exists.
func (m *Manager) idMappings(s *core.ContainerSpec, pod *core.PodMembership) (storage.IDMappingOptions, error) {
	var opts storage.IDMappingOptions
	mode, err := s.UserNSMode()
	if err != nil {
		return opts, err
	}
	if pod != nil && !s.PodInfra && pod.InfraID != "" {
		return m.memberIDMappings(mode, pod)
	}
	if mode == "" {
		return opts, nil
	}
	if m.subIDs == nil {
		return opts, core.InvalidArgument("userns", errors.New("the engine has no subordinate ID ranges for user namespaces"))
	}
	if s.Rootfs != "" {
		// A host directory as root filesystem keeps the host's owners.
		return opts, core.InvalidArgument("userns", errors.New("a user namespace with --rootfs is not supported"))
	}
	switch mode {
	case core.UserNSAuto:
		size, err := s.AutoUserNSSize()
		if err != nil {
			return opts, err
		}
		opts.AutoUserNs = true
		opts.AutoUserNsOpts = storage.AutoUserNsOptions{Size: size}
		return opts, nil
	}
	inUse, err := m.mappingsInUse()
	if err != nil {
		return opts, err
	}
	if err := userns.CheckMaps("uidmap", s.IDMappings.UIDMap, m.subIDs.UIDs, inUse.uids); err != nil {
		return opts, err
	}
	if err := userns.CheckMaps("gidmap", s.IDMappings.GIDMap, m.subIDs.GIDs, inUse.gids); err != nil {
		return opts, err
	}
	opts.UIDMap = toStorageMaps(s.IDMappings.UIDMap)
	opts.GIDMap = toStorageMaps(s.IDMappings.GIDMap)
	return opts, nil
}

// memberIDMappings are the mappings of a pod member: the pod's user
// namespace, which its infra container holds (the host's where it has
// none). The member joins that namespace, so its root filesystem is
// created for the same mappings; the range stays the infra container's
// (containers/storage counts a range used while any container maps it, so
// members sharing it take nothing more and free nothing on removal). A
// member cannot have a user namespace of its own: it joins the pod's
// network and other namespaces, which belong to the pod's.
func (m *Manager) memberIDMappings(mode string, pod *core.PodMembership) (storage.IDMappingOptions, error) {
	var opts storage.IDMappingOptions
	m.mu.RLock()
	infra, ok := m.byID[pod.InfraID]
	var uids, gids []core.IDMap
	if ok {
		uids, gids = slices.Clone(infra.rec.UIDMap), slices.Clone(infra.rec.GIDMap)
	}
	m.mu.RUnlock()
	if !ok {
		return opts, fmt.Errorf("the infra container of pod %s is gone: %w", pod.PodName, core.ErrStateConflict)
	}
	if mode != "" {
		where := "the host's"
		if len(uids) > 0 {
			where = "the pod's own"
		}
		return opts, core.InvalidArgument("userns", fmt.Errorf("a member of pod %s joins the pod's user namespace (%s): it cannot have one of its own (set --userns on the pod)", pod.PodName, where))
	}
	if len(uids) == 0 {
		return opts, nil
	}
	opts.UIDMap, opts.GIDMap = toStorageMaps(uids), toStorageMaps(gids)
	return opts, nil
}

type usedMaps struct{ uids, gids []core.IDMap }

// mappingsInUse are the host ranges of every storage container's user
// namespace: the store's containers.json is what containers/storage
// allocates --userns=auto ranges against, so both see the same truth.
func (m *Manager) mappingsInUse() (usedMaps, error) {
	var used usedMaps
	ctrs, err := m.store.Containers()
	if err != nil {
		return used, err
	}
	for _, c := range ctrs {
		used.uids = append(used.uids, fromStorageMaps(c.UIDMap)...)
		used.gids = append(used.gids, fromStorageMaps(c.GIDMap)...)
	}
	return used, nil
}

// createStorage creates the container's storage with its ID mappings and
// answers the mappings it got. An automatic range that cannot be found
// is the client's 400: nothing is created.
func (m *Manager) createStorage(id string, spec *core.ContainerSpec, imageID string, pod *core.PodMembership) (*storage.Container, error) {
	m.idMu.Lock()
	defer m.idMu.Unlock()
	idOpts, err := m.idMappings(spec, pod)
	if err != nil {
		return nil, err
	}
	if idOpts.AutoUserNs || len(idOpts.UIDMap) > 0 {
		if err := m.traversableStorage(); err != nil {
			return nil, err
		}
	}
	sc, err := m.store.CreateContainer(id, nil, imageID, "", "", &storage.ContainerOptions{Volatile: true, IDMappingOptions: idOpts})
	if err != nil {
		if errors.Is(err, storagetypes.ErrNoAvailableIDs) {
			return nil, core.InvalidArgument("userns", fmt.Errorf("no free range of the %s user's subordinate IDs is large enough: %w", userns.User, err))
		}
		if idOpts.AutoUserNs && strings.Contains(err.Error(), "user namespace with size") {
			return nil, core.InvalidArgument("userns", err)
		}
		return nil, fmt.Errorf("create container storage: %w", err)
	}
	if len(sc.UIDMap) > 0 {
		// The container's own layer directory (its merged root below).
		layerDir := filepath.Join(m.store.GraphRoot(), m.store.GraphDriverName(), sc.LayerID)
		if err := os.Chmod(layerDir, 0o711); err != nil {
			m.store.DeleteContainer(sc.ID)
			return nil, fmt.Errorf("create container storage: %w", err)
		}
	}
	return sc, nil
}

func toStorageMaps(maps []core.IDMap) []idtools.IDMap {
	out := make([]idtools.IDMap, len(maps))
	for i, m := range maps {
		out[i] = idtools.IDMap{ContainerID: m.ContainerID, HostID: m.HostID, Size: m.Size}
	}
	return out
}

func fromStorageMaps(maps []idtools.IDMap) []core.IDMap {
	var out []core.IDMap
	for _, m := range maps {
		out = append(out, core.IDMap{ContainerID: m.ContainerID, HostID: m.HostID, Size: m.Size})
	}
	return out
}

// ociMappings are a record's mappings as the runtime spec takes them.
func ociMappings(maps []core.IDMap) []specs.LinuxIDMapping {
	var out []specs.LinuxIDMapping
	for _, m := range maps {
		out = append(out, specs.LinuxIDMapping{ContainerID: uint32(m.ContainerID), HostID: uint32(m.HostID), Size: uint32(m.Size)})
	}
	return out
}

// hostRoot is the host uid and gid of the container's root (0, 0 without
// a user namespace).
func hostRoot(rec *record) (uid, gid int) {
	return hostID(rec.UIDMap, 0), hostID(rec.GIDMap, 0)
}

func hostID(maps []core.IDMap, id int) int {
	for _, m := range maps {
		if id >= m.ContainerID && id < m.ContainerID+m.Size {
			return m.HostID + id - m.ContainerID
		}
	}
	return id
}

// idMappingStrings are the mappings as inspect shows them ("0:100000:65536").
func idMappingStrings(maps []core.IDMap) []string {
	out := make([]string, 0, len(maps))
	for _, m := range maps {
		out = append(out, fmt.Sprintf("%d:%d:%d", m.ContainerID, m.HostID, m.Size))
	}
	return out
}

// usernsMode is HostConfig.UsernsMode as Podman shows it: "" for the host's
// user namespace, "auto" or "private".
func usernsMode(s *core.ContainerSpec) string {
	mode, _ := s.UserNSMode()
	return mode
}

func inspectIDMappings(rec *record) *core.InspectIDMappings {
	if len(rec.UIDMap) == 0 {
		return nil
	}
	return &core.InspectIDMappings{UIDMap: idMappingStrings(rec.UIDMap), GIDMap: idMappingStrings(rec.GIDMap)}
}

// traversableStorage lets a user namespace's root reach its root
// filesystem: runc mounts it from inside the user namespace, where the
// storage's 0700 directories owned by the host's root are closed. The
// graph root and the driver's directory become 0711 (pass through, no
// listing); each container's own layer directory belongs to its mapped
// root and is 0711 too (createStorage), every other one stays 0700.
func (m *Manager) traversableStorage() error {
	root := m.store.GraphRoot()
	for dir := filepath.Dir(root); ; dir = filepath.Dir(dir) {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("user namespaces need every directory above the storage (%s) to be searchable by others: %s is %v", root, dir, fi.Mode().Perm())
		}
		if dir == "/" {
			break
		}
	}
	for _, dir := range []string{root, filepath.Join(root, m.store.GraphDriverName())} {
		fi, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if fi.Mode().Perm()&0o011 != 0o011 {
			if err := os.Chmod(dir, fi.Mode().Perm()|0o011); err != nil {
				return err
			}
		}
	}
	return nil
}

// inspectAppArmor is the profile inspect reports: the one the container
// runs under ("" without AppArmor).
func (m *Manager) inspectAppArmor(s *core.ContainerSpec) string {
	p, err := m.apparmorProfile(s)
	if err != nil {
		return s.ApparmorProfile
	}
	return p
}
