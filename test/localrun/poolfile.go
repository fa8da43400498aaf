package localrun

import (
	"strings"

	"github.com/scw-lb-ipam/scw-lb-ipam/test/emulator"
)

// PoolFile writes a pool file template against the emulator's Private
// Networks: each {{name}} becomes the ID of the Private Network name.
func PoolFile(template string, pns map[string]emulator.PrivateNetwork) string {
	for name, pn := range pns {
		template = strings.ReplaceAll(template, "{{"+name+"}}", pn.ID)
	}
	return template
}
