package localrun

import (
	"strings"

	"github.com/scw-lb-ipam/scw-lb-ipam/ipam/scaleway/scalewaytest"
)

// PoolFile writes a pool file template against the emulator's Private
// Networks: each {{name}} becomes the ID of the Private Network name.
func PoolFile(template string, pns map[string]scalewaytest.PrivateNetwork) string {
	for name, pn := range pns {
		template = strings.ReplaceAll(template, "{{"+name+"}}", pn.ID)
	}
	return template
}
