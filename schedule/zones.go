package schedule

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// The IANA timezone database this binary computes firing times with: Go's
// zoneinfo.zip of release TZDataVersion, embedded so that a host's
// zoneinfo files or a ZONEINFO variable cannot change when a cron entry
// fires (time.LoadLocation reads those first). `make tzdata` refreshes it
// from the Go toolchain that builds the binary.
var (
	//go:embed tzdata/zoneinfo.zip
	zoneinfoZip []byte
	//go:embed tzdata/VERSION
	tzdataVersion string
)

// TZDataVersion is the release of the embedded timezone database, such as
// "2025c"; /readyz reports it.
func TZDataVersion() string { return strings.TrimSpace(tzdataVersion) }

var (
	zoneArchive = sync.OnceValues(func() (*zip.Reader, error) {
		return zip.NewReader(bytes.NewReader(zoneinfoZip), int64(len(zoneinfoZip)))
	})
	zoneCache sync.Map // name -> *time.Location
)

// errNoZone: the embedded database has no zone of that name.
var errNoZone = errors.New("no such timezone")

// embeddedZone loads name from the embedded database only; names are
// matched exactly (America/New_York, UTC, Etc/GMT+5).
func embeddedZone(name string) (*time.Location, error) {
	if loc, ok := zoneCache.Load(name); ok {
		return loc.(*time.Location), nil
	}
	archive, err := zoneArchive()
	if err != nil {
		return nil, err
	}
	f, err := archive.Open(name)
	if err != nil {
		return nil, errNoZone
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.IsDir() {
		return nil, errNoZone
	}
	data, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, err
	}
	loc, err := time.LoadLocationFromTZData(name, data)
	if err != nil {
		return nil, errNoZone
	}
	actual, _ := zoneCache.LoadOrStore(name, loc)
	return actual.(*time.Location), nil
}

// ZoneCount loads every zone of the embedded database and returns how many
// there are; an error names the first that does not load.
func ZoneCount() (int, error) {
	archive, err := zoneArchive()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, f := range archive.File {
		if strings.HasSuffix(f.Name, "/") {
			continue
		}
		if _, err := embeddedZone(f.Name); err != nil {
			return n, fmt.Errorf("zone %s: %w", f.Name, err)
		}
		n++
	}
	return n, nil
}
