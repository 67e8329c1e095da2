package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// dbName is the database the run's processes share.
const dbName = "actionsledger_chaos"

// cluster is the run's private PostgreSQL cluster: its data folder, socket
// folder and server log live under the run folder, it listens on
// 127.0.0.1:port with trust authentication for user postgres. When the
// runner is root, initdb and pg_ctl run as the system user postgres (they
// refuse to run as root).
type cluster struct {
	bin       string // folder of initdb, pg_ctl, pg_dump
	data, log string
	sock      string
	port      int
	cred      *syscall.Credential
}

// findPGBin returns the folder holding initdb and pg_ctl: dir when given,
// else the newest /usr/lib/postgresql/<version>/bin that has both, else the
// folder of pg_ctl on PATH (as scripts/pg.sh looks).
func findPGBin(dir string) (string, error) {
	has := func(d string) bool {
		for _, f := range []string{"initdb", "pg_ctl"} {
			if fi, err := os.Stat(filepath.Join(d, f)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if dir != "" {
		if !has(dir) {
			return "", fmt.Errorf("no initdb and pg_ctl in %s", dir)
		}
		return dir, nil
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(found, func(a, b string) int { return pgVersion(a) - pgVersion(b) })
	for i := len(found) - 1; i >= 0; i-- {
		if has(found[i]) {
			return found[i], nil
		}
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil && has(filepath.Dir(p)) {
		return filepath.Dir(p), nil
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, pg_ctl) under /usr/lib/postgresql/*/bin or on PATH; " +
		"install the postgresql package (scripts/pg.sh does) or set CHAOS_PG_BIN")
}

// pgVersion reads the major version from /usr/lib/postgresql/<v>/bin.
func pgVersion(bin string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(bin)))
	return v
}

// newCluster initialises a cluster in dir/pgdata and starts it on a free
// port. dir must exist; when root, it is handed to user postgres.
func newCluster(ctx context.Context, bin, dir string) (*cluster, error) {
	cred, err := pgCredential()
	if err != nil {
		return nil, err
	}
	c := &cluster{bin: bin, data: filepath.Join(dir, "pgdata"), sock: filepath.Join(dir, "sock"),
		log: filepath.Join(dir, "logs", "postgres.log"), cred: cred}
	for _, d := range []string{c.sock, filepath.Dir(c.log)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if c.cred != nil {
		for _, d := range []string{dir, c.sock, filepath.Dir(c.log)} {
			if err := os.Chown(d, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
				return nil, err
			}
		}
	}
	if out, err := c.run(ctx, "initdb", "-D", c.data, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--no-locale", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w\n%s", err, out)
	}
	for range 3 { // a free port can be taken before the server binds it
		if c.port, err = freePort(); err != nil {
			return nil, err
		}
		var out string
		if out, err = c.ctl(ctx, "start", "-w", "-t", "60", "-l", c.log, "-o", c.options()); err == nil {
			return c, nil
		}
		err = fmt.Errorf("pg_ctl start: %w\n%s", err, out)
	}
	return nil, err
}

// pgCredential returns the user PostgreSQL programs run as: nil (the
// runner itself) unless the runner is root, then the system user postgres.
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, initdb needs the system user postgres: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// options are the server's command-line options.
func (c *cluster) options() string {
	return fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -k %s -c max_connections=200", c.port, c.sock)
}

// URL returns the URL of database db on the cluster.
func (c *cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// createDB creates database db.
func (c *cluster) createDB(ctx context.Context, db string) error {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, `CREATE DATABASE `+pgx.Identifier{db}.Sanitize())
	return err
}

// crashRestart stops the server without a shutdown checkpoint (every
// backend is cut off as in a crash; the next start runs crash recovery)
// and starts it again: `pg_ctl restart -m immediate`.
func (c *cluster) crashRestart(ctx context.Context) error {
	if out, err := c.ctl(ctx, "restart", "-m", "immediate", "-w", "-t", "60", "-l", c.log, "-o", c.options()); err != nil {
		return fmt.Errorf("pg_ctl restart -m immediate: %w\n%s", err, out)
	}
	return nil
}

// stop stops the server (fast shutdown, then immediate). Harmless when it
// is not running.
func (c *cluster) stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return stopCluster(ctx, c.bin, c.data, c.cred)
}

// dump writes a pg_dump (custom format) of db to path.
func (c *cluster) dump(ctx context.Context, db, path string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, "pg_dump"), "-Fc", "-f", path, c.URL(db))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_dump: %w\n%s", err, out)
	}
	return nil
}

func (c *cluster) ctl(ctx context.Context, args ...string) (string, error) {
	return c.run(ctx, "pg_ctl", append([]string{"-D", c.data}, args...)...)
}

func (c *cluster) run(ctx context.Context, name string, args ...string) (string, error) {
	return runPG(ctx, filepath.Join(c.bin, name), c.cred, filepath.Dir(c.data), args...)
}

// stopCluster stops the cluster in data, fast then immediate; a folder
// with no running server is left alone.
func stopCluster(ctx context.Context, bin, data string, cred *syscall.Credential) error {
	ctl := filepath.Join(bin, "pg_ctl")
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err != nil {
		return nil // not running
	}
	if _, err := runPG(ctx, ctl, cred, filepath.Dir(data), "-D", data, "stop", "-m", "fast", "-w", "-t", "20"); err == nil {
		return nil
	}
	out, err := runPG(ctx, ctl, cred, filepath.Dir(data), "-D", data, "stop", "-m", "immediate", "-w", "-t", "20")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %w\n%s", err, out)
	}
	return nil
}

// runPG runs a PostgreSQL program in dir as cred's user (nil: ourselves),
// in a process group of its own so a Ctrl-C reaches only the runner (which
// then stops the server in order), and returns its combined output.
func runPG(ctx context.Context, path string, cred *syscall.Credential, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: cred}
	// pg_ctl hands its own output file to the server it starts: with
	// pipes, CombinedOutput would wait for the server to exit.
	out, err := os.CreateTemp("", "chaos-pg-*.out")
	if err != nil {
		return "", err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	b, _ := os.ReadFile(out.Name())
	return strings.TrimSpace(string(b)), err
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
