package kube

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// mountSource is how a pod volume is mounted into containers.
type mountSource struct {
	hostPath string
	// device is a hostPath of type CharDevice or BlockDevice: the device
	// is given to the container at the mount path, as Podman does.
	device string
	named  string
	tmpfs  string
	// image is an image volume's reference (made local by the plan).
	image    string
	readOnly bool
	optional bool
}

func (pl *planner) volumes(ctx context.Context, d *document, t podTemplate, pp *podPlan, out *plan, volumeFiles map[string]bool) (map[string]mountSource, error) {
	mounts := map[string]mountSource{}
	for i, v := range t.spec.Volumes {
		field := fmt.Sprintf("%s.volumes[%d]", t.path, i)
		if v.Name == "" {
			return nil, d.fail(field+".name", errors.New("missing"))
		}
		if _, dup := mounts[v.Name]; dup {
			return nil, d.fail(field+".name", fmt.Errorf("%q is declared twice", v.Name))
		}
		var src mountSource
		switch {
		case v.HostPath != nil:
			hp := v.HostPath
			if !filepath.IsAbs(hp.Path) {
				return nil, d.fail(field+".hostPath.path", fmt.Errorf("%q is not an absolute path", hp.Path))
			}
			typ := v1.HostPathUnset
			if hp.Type != nil {
				typ = *hp.Type
			}
			if err := checkHostPath(hp.Path, typ); err != nil {
				return nil, d.fail(field+".hostPath", err)
			}
			if typ == v1.HostPathDirectoryOrCreate {
				pp.hostDirs = append(pp.hostDirs, hp.Path)
			}
			if typ == v1.HostPathCharDev || typ == v1.HostPathBlockDev {
				src.device = filepath.Clean(hp.Path)
				break
			}
			src.hostPath = filepath.Clean(hp.Path)
		case v.EmptyDir != nil:
			switch v.EmptyDir.Medium {
			case v1.StorageMediumDefault:
				if v.EmptyDir.SizeLimit != nil {
					return nil, d.fail(field+".emptyDir.sizeLimit", errors.New("is supported with medium Memory only"))
				}
			case v1.StorageMediumMemory:
				src.tmpfs = "rw"
				if sl := v.EmptyDir.SizeLimit; sl != nil {
					src.tmpfs += ",size=" + strconv.FormatInt(sl.Value(), 10)
				}
			default:
				return nil, d.fail(field+".emptyDir.medium", fmt.Errorf("%q is not \"\" or Memory", v.EmptyDir.Medium))
			}
		case v.PersistentVolumeClaim != nil:
			claim := v.PersistentVolumeClaim.ClaimName
			if claim == "" || !validName(claim) {
				return nil, d.fail(field+".persistentVolumeClaim.claimName", fmt.Errorf("%q is not a volume name", claim))
			}
			src.named = claim
			src.readOnly = v.PersistentVolumeClaim.ReadOnly
		case v.ConfigMap != nil:
			cm, ok := pl.configMaps[v.ConfigMap.Name]
			if !ok {
				if v.ConfigMap.Optional != nil && *v.ConfigMap.Optional {
					src.optional = true
					break
				}
				return nil, d.fail(field+".configMap.name", fmt.Errorf("no ConfigMap %q in the YAML", v.ConfigMap.Name))
			}
			data := map[string][]byte{}
			for k, val := range cm.Data {
				data[k] = []byte(val)
			}
			for k, val := range cm.BinaryData {
				data[k] = val
			}
			files, err := volumeItems(data, v.ConfigMap.Items)
			if err != nil {
				return nil, d.fail(field+".configMap.items", err)
			}
			src.named = cm.Name
			if !volumeFiles[cm.Name] {
				volumeFiles[cm.Name] = true
				out.volumes = append(out.volumes, volumePlan{name: cm.Name, labels: cm.Labels, opts: map[string]string{}, files: files})
			}
		case v.Secret != nil:
			data, ok := pl.secrets[v.Secret.SecretName]
			if !ok {
				if v.Secret.Optional != nil && *v.Secret.Optional {
					src.optional = true
					break
				}
				return nil, d.fail(field+".secret.secretName", fmt.Errorf("no Secret %q in the YAML", v.Secret.SecretName))
			}
			files, err := volumeItems(data, v.Secret.Items)
			if err != nil {
				return nil, d.fail(field+".secret.items", err)
			}
			src.named = v.Secret.SecretName
			if !volumeFiles[src.named] {
				volumeFiles[src.named] = true
				out.volumes = append(out.volumes, volumePlan{name: src.named, opts: map[string]string{}, files: files})
			}
		case v.Image != nil:
			// An image's files, read-only (Kubernetes' image volume,
			// Podman's type=image mount): made local per its pull policy
			// as a container's image is.
			ref, err := pl.image(ctx, d, field+".image", v1.Container{Image: v.Image.Reference, ImagePullPolicy: v.Image.PullPolicy})
			if err != nil {
				return nil, err
			}
			src.image = ref
			src.readOnly = true
		default:
			return nil, d.fail(field, errors.New("needs hostPath, emptyDir, persistentVolumeClaim, configMap, secret or image"))
		}
		mounts[v.Name] = src
	}
	return mounts, nil
}

// checkHostPath checks a hostPath volume's path against its type.
func checkHostPath(path string, typ v1.HostPathType) error {
	fi, err := os.Stat(path)
	switch typ {
	case v1.HostPathUnset, v1.HostPathDirectoryOrCreate:
		if err == nil && typ == v1.HostPathDirectoryOrCreate && !fi.IsDir() {
			return fmt.Errorf("%q is not a directory", path)
		}
		return nil
	case v1.HostPathFileOrCreate:
		if err == nil && fi.IsDir() {
			return fmt.Errorf("%q is a directory", path)
		}
		if err != nil {
			return fmt.Errorf("type FileOrCreate: %q does not exist (only DirectoryOrCreate creates)", path)
		}
		return nil
	case v1.HostPathDirectory:
		if err != nil || !fi.IsDir() {
			return fmt.Errorf("%q is not an existing directory", path)
		}
	case v1.HostPathFile:
		if err != nil || !fi.Mode().IsRegular() {
			return fmt.Errorf("%q is not an existing file", path)
		}
	case v1.HostPathSocket:
		if err != nil || fi.Mode()&os.ModeSocket == 0 {
			return fmt.Errorf("%q is not an existing socket", path)
		}
	case v1.HostPathCharDev:
		if err != nil || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice == 0 {
			return fmt.Errorf("%q is not an existing character device", path)
		}
	case v1.HostPathBlockDev:
		if err != nil || fi.Mode()&os.ModeDevice == 0 || fi.Mode()&os.ModeCharDevice != 0 {
			return fmt.Errorf("%q is not an existing block device", path)
		}
	default:
		return fmt.Errorf("type %q is not supported (\"\", Directory, DirectoryOrCreate, File, FileOrCreate, Socket, CharDevice, BlockDevice)", typ)
	}
	return nil
}

// volumeItems maps the keys of a ConfigMap or Secret to file names.
func volumeItems(data map[string][]byte, items []v1.KeyToPath) (map[string][]byte, error) {
	files := map[string][]byte{}
	if len(items) == 0 {
		for k, v := range data {
			if !validFileName(k) {
				return nil, fmt.Errorf("key %q is not a file name", k)
			}
			files[k] = v
		}
		return files, nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			return nil, fmt.Errorf("no key %q", it.Key)
		}
		if !validFileName(it.Path) {
			return nil, fmt.Errorf("path %q is not a file name", it.Path)
		}
		files[it.Path] = v
	}
	return files, nil
}

func validFileName(n string) bool {
	return n != "" && n != "." && n != ".." && !strings.ContainsAny(n, "/\x00")
}
