package network

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// createNetNS creates a new network namespace and bind-mounts it at path,
// so that it outlives every process in it (and the engine): netavark sets
// it up, runc joins it, and removeNetNS releases it.
func createNetNS(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if err != nil {
		if errors.Is(err, os.ErrExist) && isNetNSMount(path) {
			return nil
		}
		if !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create network namespace file %s: %w", path, err)
		}
	} else {
		f.Close()
	}
	if err := unshareAndMount(path); err != nil {
		os.Remove(path)
		return err
	}
	return nil
}

// unshareAndMount creates the namespace on a locked thread and puts the
// thread back into the engine's own namespace afterwards: the thread may
// be the process's main thread, whose namespace /proc/self/net reports, so
// it must never stay in the container's. A thread that cannot return stays
// locked, which makes the runtime retire it when the goroutine ends.
func unshareAndMount(path string) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self := fmt.Sprintf("/proc/self/task/%d/ns/net", unix.Gettid())
		orig, err := os.Open(self)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("open the engine's network namespace: %w", err)
			return
		}
		defer orig.Close()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("unshare network namespace: %w", err)
			return
		}
		err = unix.Mount(self, path, "none", unix.MS_BIND, "")
		if serr := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); serr != nil {
			done <- errors.Join(err, fmt.Errorf("return to the engine's network namespace: %w", serr))
			return
		}
		runtime.UnlockOSThread()
		if err != nil {
			done <- fmt.Errorf("bind-mount network namespace at %s: %w", path, err)
			return
		}
		done <- nil
	}()
	return <-done
}

// isNetNSMount reports whether path is a bind-mounted network namespace.
func isNetNSMount(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.NSFS_MAGIC
}

// bindNetNS keeps an existing namespace (from, /proc/PID/ns/net) at path,
// where removeNetNS finds it as it finds one createNetNS made.
func bindNetNS(from, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if isNetNSMount(path) {
		if err := removeNetNS(path); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, 0o444)
	if err != nil {
		return fmt.Errorf("create network namespace file %s: %w", path, err)
	}
	f.Close()
	if err := unix.Mount(from, path, "", unix.MS_BIND, ""); err != nil {
		os.Remove(path)
		return fmt.Errorf("bind network namespace %s at %s: %w", from, path, err)
	}
	return nil
}

// removeNetNS unmounts and deletes a namespace file; a missing one is fine.
func removeNetNS(path string) error {
	if path == "" {
		return nil
	}
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount network namespace %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove network namespace file %s: %w", path, err)
	}
	return nil
}
