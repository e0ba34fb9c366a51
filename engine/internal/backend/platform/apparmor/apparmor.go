// Package apparmor is the engine's seam to the host's AppArmor: whether
// the kernel enforces it, which profiles are loaded, and the engine's
// default container profile, loaded with apparmor_parser at start. On a
// host without AppArmor (these machines' kernel) everything reports it
// off and nothing is loaded; a container may then ask only for
// "unconfined".
package apparmor

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// DefaultProfile is the name of the engine's container profile.
const DefaultProfile = "berth-default"

// Unconfined asks for no profile.
const Unconfined = "unconfined"

// Host is what the engine knows of AppArmor, chosen once at start.
type Host struct {
	// Enabled: the kernel enforces AppArmor and the default profile is loaded.
	Enabled bool
	// profilesFile lists the loaded profiles.
	profilesFile string
}

// Paths the kernel exposes.
const (
	enabledParam = "/sys/module/apparmor/parameters/enabled"
	profilesFile = "/sys/kernel/security/apparmor/profiles"
)

// Detect finds whether the host enforces AppArmor and, where it does,
// loads the default profile (apparmor_parser -r, which replaces an older
// version of it); dir is where the profile's text is written. Without
// AppArmor it answers a disabled Host and no error.
func Detect(ctx context.Context, dir string) (Host, error) {
	data, err := os.ReadFile(enabledParam)
	if err != nil || strings.TrimSpace(string(data)) != "Y" {
		return Host{}, nil
	}
	if _, err := os.Stat(profilesFile); err != nil {
		return Host{}, nil
	}
	h := Host{profilesFile: profilesFile}
	if err := loadDefault(ctx, dir); err != nil {
		return Host{}, err
	}
	h.Enabled = true
	return h, nil
}

func loadDefault(ctx context.Context, dir string) error {
	parser, err := exec.LookPath("apparmor_parser")
	if err != nil {
		for _, p := range []string{"/sbin/apparmor_parser", "/usr/sbin/apparmor_parser"} {
			if _, statErr := os.Stat(p); statErr == nil {
				parser, err = p, nil
				break
			}
		}
		if err != nil {
			return errors.New("AppArmor is enabled but apparmor_parser is missing (Debian package apparmor)")
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	path := filepath.Join(dir, DefaultProfile)
	if err := os.WriteFile(path, []byte(defaultProfileText), 0o600); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, parser, "-Kr", path).CombinedOutput(); err != nil {
		return fmt.Errorf("apparmor_parser -Kr %s: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Loaded tells whether a profile of that name is loaded in the kernel.
func (h Host) Loaded(name string) (bool, error) {
	if !h.Enabled {
		return false, nil
	}
	f, err := os.Open(h.profilesFile)
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "name (enforce)"
		if n, _, _ := strings.Cut(sc.Text(), " ("); n == name {
			return true, nil
		}
	}
	return false, sc.Err()
}

// RuntimeLabels are the labels the OCI runtimes run under where the host
// ships a profile for them (AppArmor 4, Debian 13: "runc" and "crun", in
// unconfined mode, only to name them). What they start inherits the label:
// CRIU too, started by runc for a checkpoint. The default profile lets
// them signal a container's processes, as it lets unconfined processes:
// without it CRIU's SIGKILL that ends a checkpointed container is denied
// (kill's error is not checked there) and the dump waits for the
// container's death for ever; a "runc kill" would be denied alike.
var RuntimeLabels = []string{"runc", "crun"}

// defaultProfileText is the container profile, after Docker's
// docker-default: the container may use the network and files, but not
// mount, write kernel tunables, reach the host's kernel interfaces under
// /proc and /sys, or ptrace outside its profile. Signals come from
// unconfined processes (the engine, conmon), the runtimes
// (RuntimeLabels) and the container itself.
const defaultProfileText = `#include <tunables/global>

profile berth-default flags=(attach_disconnected,mediate_deleted) {
  #include <abstractions/base>

  network,
  capability,
  file,
  umount,
  signal (receive) peer=unconfined,
  signal (receive) peer=runc,
  signal (receive) peer=crun,
  signal (send,receive) peer=berth-default,

  deny @{PROC}/* w,
  deny @{PROC}/{[^1-9],[^1-9][^0-9],[^1-9s][^0-9y][^0-9s],[^1-9][^0-9][^0-9][^0-9/]*}/** w,
  deny @{PROC}/sys/[^k]** w,
  deny @{PROC}/sys/kernel/{?,??,[^s][^h][^m]**} w,
  deny @{PROC}/sysrq-trigger rwklx,
  deny @{PROC}/kcore rwklx,

  deny mount,

  deny /sys/[^f]*/** wklx,
  deny /sys/f[^s]*/** wklx,
  deny /sys/fs/[^c]*/** wklx,
  deny /sys/fs/c[^g]*/** wklx,
  deny /sys/fs/cg[^r]*/** wklx,
  deny /sys/firmware/** rwklx,
  deny /sys/kernel/security/** rwklx,

  ptrace (trace,read,tracedby,readby) peer=berth-default,
}
`
