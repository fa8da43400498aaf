package emulator

import "github.com/scaleway/scaleway-sdk-go/scw"

// Credentials shaped like real ones, so that the SDK accepts them. They open
// only an emulator: TestSecretKey is what servers guarded by a secret are
// usually given, and what ClientOptions sends to the others, which take any.
const (
	TestAccessKey = "SCWABCDEFGHIJKLMNOPQ"
	TestSecretKey = "6f5d9a3c-1b2e-4c8d-9e7f-0a1b2c3d4e5f"
)

// ClientOptions are what an SDK client needs to talk to this emulator as its
// default project: the URL Start returned, credentials it accepts, and the
// project. Callers append their own (region, zone, user agent) after them.
func (s *Server) ClientOptions() []scw.ClientOption {
	secret := s.opts.SecretKey
	if secret == "" {
		secret = TestSecretKey
	}
	return []scw.ClientOption{
		scw.WithAPIURL(s.URL()),
		scw.WithAuth(TestAccessKey, secret),
		scw.WithDefaultProjectID(s.opts.ProjectID),
	}
}
