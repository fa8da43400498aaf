package localrun

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

var volumeWrites atomic.Int64

// WriteSecretVolume writes files into dir as the kubelet writes a Secret
// volume: each file is a link into a data directory that a rename swaps as
// a whole, so that a reader sees the old files or the new ones, never a mix.
func WriteSecretVolume(dir string, files map[string]string) error {
	data := fmt.Sprintf("..data-%d-%d", os.Getpid(), volumeWrites.Add(1))
	if err := os.MkdirAll(filepath.Join(dir, data), 0o755); err != nil {
		return err
	}
	for name, v := range files {
		if err := os.WriteFile(filepath.Join(dir, data, name), []byte(v), 0o600); err != nil {
			return err
		}
	}
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(data, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	for name := range files {
		link := filepath.Join(dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			if err := os.Symlink(filepath.Join("..data", name), link); err != nil {
				return err
			}
		}
	}
	return nil
}
