package testenv

import "github.com/scaleway/scaleway-sdk-go/scw"

// ConsoleUserAgent is sent with the calls a suite makes as a user does in
// Scaleway's console or with Terraform, behind the webhook's back (an IP
// released out of band): WebhookCalls leaves them out.
const ConsoleUserAgent = "scaleway-console-stand-in"

// Console is a Scaleway client on the emulator for those calls, in the
// webhook's Project, region fr-par and zone fr-par-1.
func (e *Env) Console() (*scw.Client, error) {
	return scw.NewClient(append(e.ScalewayOptions(), scw.WithUserAgent(ConsoleUserAgent),
		scw.WithDefaultRegion(scw.RegionFrPar), scw.WithDefaultZone(scw.ZoneFrPar1))...)
}
