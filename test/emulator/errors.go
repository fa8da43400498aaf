package emulator

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Errors of the Go API (AddPrivateNetwork, AddIP, Attach, Detach) wrap one of
// these; HTTP clients get the matching Scaleway error body instead.
var (
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrOutOfStock         = errors.New("out of stock")
	ErrInvalidArgument    = errors.New("invalid argument")
	ErrPreconditionFailed = errors.New("precondition failed")
)

// apiError is an API refusal: an HTTP status, a Scaleway error body, and
// the sentinel the Go API wraps.
type apiError struct {
	status int
	body   map[string]any
	kind   error
	// id names the object when the body does not (the Load Balancer API's
	// bare 404s), for the Go API's errors.
	id string
}

func (e *apiError) Error() string {
	msg, _ := e.body["message"].(string)
	parts := []string{msg}
	if h, ok := e.body["help_message"].(string); ok && h != "" {
		parts = append(parts, h)
	}
	if d, ok := e.body["details"].([]map[string]any); ok {
		for _, x := range d {
			parts = append(parts, fmt.Sprintf("%v: %v", x["argument_name"], x["help_message"]))
		}
	}
	if r, ok := e.body["resource"].(string); ok && r != "" {
		parts = append(parts, fmt.Sprintf("resource %s %v", r, e.body["resource_id"]))
	}
	if e.id != "" {
		parts = append(parts, e.id)
	}
	return "emulator: " + strings.Join(parts, ": ")
}

func (e *apiError) Unwrap() error { return e.kind }

func (e *apiError) reply() reply { return reply{status: e.status, body: e.body} }

// errorReply turns a core error into an answer; anything but an apiError is
// an emulator bug, answered like the API's own internal errors.
func errorReply(err error) reply {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae.reply()
	}
	return reply{status: http.StatusInternalServerError, body: serverErrorBody()}
}

// The bodies below follow recorded Scaleway answers (see
// shared/scaleway-recordings/scaleway-real-error-bodies.json): the API
// gateway's common error format, keys in alphabetical order as it sends them.
//
// IPAM itself was only ever recorded answering 404 not_found. Its conflict
// (409 already_exists), exhaustion (out_of_stock), validation (400
// invalid_arguments) and precondition (412) bodies were never recorded: they
// are modelled on the gateway's common format as other Scaleway APIs answer
// it, with the fields scaleway-sdk-go's typed errors read.

func notFoundErr(resource, id string) *apiError {
	return &apiError{status: http.StatusNotFound, kind: ErrNotFound, body: map[string]any{
		"message":     "resource is not found",
		"resource":    resource,
		"resource_id": id,
		"type":        "not_found",
	}}
}

func alreadyExistsErr(resource, id, help string) *apiError {
	return &apiError{status: http.StatusConflict, kind: ErrAlreadyExists, body: map[string]any{
		"help_message": help,
		"message":      "resource already exists",
		"resource":     resource,
		"resource_id":  id,
		"type":         "already_exists",
	}}
}

// outOfStockErr matches scw.OutOfStockError, which reads "resource" only.
func outOfStockErr(resource string) *apiError {
	return &apiError{status: http.StatusConflict, kind: ErrOutOfStock, body: map[string]any{
		"message":  "resource is out of stock",
		"resource": resource,
		"type":     "out_of_stock",
	}}
}

func invalidArgumentErr(argument, helpFormat string, args ...any) *apiError {
	return &apiError{status: http.StatusBadRequest, kind: ErrInvalidArgument, body: map[string]any{
		"details": []map[string]any{{
			"argument_name": argument,
			"help_message":  fmt.Sprintf(helpFormat, args...),
			"reason":        "constraint",
		}},
		"message": "invalid argument(s)",
		"type":    "invalid_arguments",
	}}
}

// Precondition names as the API uses them.
const (
	preconditionInUse     = "resource_still_in_use"
	preconditionNotUsable = "resource_not_usable"
)

func preconditionErr(precondition, help string) *apiError {
	return &apiError{status: http.StatusPreconditionFailed, kind: ErrPreconditionFailed, body: map[string]any{
		"help_message": help,
		"message":      "precondition is not respected",
		"precondition": precondition,
		"type":         "precondition_failed",
	}}
}

func errInvalidArguments(argument, help string) reply {
	return invalidArgumentErr(argument, "%s", help).reply()
}

func errDeniedAuthentication() reply {
	return reply{status: http.StatusUnauthorized, body: map[string]any{
		"message": "authentication is denied",
		"method":  "api_key",
		"reason":  "not_found",
		"type":    "denied_authentication",
	}}
}

// errUnknownRoute names the route so that a client calling something the
// emulator does not serve sees what it called.
func errUnknownRoute(method, path string) reply {
	return notFoundErr("route", method+" "+path).reply()
}

func errUnknownRegion(region string) reply {
	return notFoundErr("region", region).reply()
}

func errUnknownZone(zone string) reply {
	return notFoundErr("zone", zone).reply()
}

func serverErrorBody() map[string]any {
	return map[string]any{"message": "Internal error", "type": "server_error"}
}

// resourceOf names the resource an operation is about, for fault bodies.
func resourceOf(op Op) string {
	switch op {
	case OpBookIP, OpGetIP, OpListIPs, OpUpdateIP, OpReleaseIP, OpReleaseIPSet, OpAttachIP, OpDetachIP, OpMoveIP:
		return "ip"
	case OpGetPrivateNetwork, OpListPrivateNetworks, OpCreatePrivateNetwork, OpDeletePrivateNetwork:
		return "private_network"
	case OpListSubnets:
		return "subnet"
	case OpCreateVPC, OpGetVPC, OpListVPCs, OpDeleteVPC, OpEnableCustomRoutesPropagation:
		return "vpc"
	case OpCreateProject, OpGetProject, OpDeleteProject:
		return "project"
	case OpCreateLB, OpGetLB, OpListLBs, OpDeleteLB, OpAttachLBPrivateNetwork, OpDetachLBPrivateNetwork, OpListLBPrivateNetworks,
		OpUpdateLB, OpMigrateLB:
		return "lb"
	case OpCreateLBIP, OpGetLBIP, OpListLBIPs, OpReleaseLBIP:
		return "lb_ip"
	case OpCreateFrontend, OpListFrontends, OpGetFrontend, OpUpdateFrontend, OpDeleteFrontend:
		return "frontend"
	case OpListACLs, OpSetACLs:
		return "acl"
	case OpCreateBackend, OpListBackends, OpGetBackend, OpUpdateBackend, OpDeleteBackend, OpSetBackendServers, OpUpdateHealthCheck:
		return "backend"
	}
	return "metadata"
}

func isRead(op Op) bool {
	switch op {
	case OpGetIP, OpListIPs, OpGetPrivateNetwork, OpListPrivateNetworks, OpListSubnets, OpGetVPC, OpListVPCs, OpMetadata, OpGetProject,
		OpGetLB, OpListLBs, OpListLBPrivateNetworks, OpGetLBIP, OpListLBIPs, OpListFrontends, OpGetFrontend, OpListACLs,
		OpListBackends, OpGetBackend:
		return true
	}
	return false
}

// faultBody is the body of an injected failure: the recorded Scaleway body
// for the status where one exists. 429 and 5xx other than 500 were never
// recorded with a type: those answer a message only, like the recorded 503,
// which the SDK turns into a plain *scw.ResponseError with the status.
func faultBody(op Op, status int) map[string]any {
	switch status {
	case http.StatusBadRequest:
		return invalidArgumentErr("body", "invalid request").body
	case http.StatusUnauthorized:
		return errDeniedAuthentication().body.(map[string]any)
	case http.StatusForbidden:
		action := "write"
		if isRead(op) {
			action = "read"
		}
		return map[string]any{
			"details": []map[string]any{{"action": action, "resource": resourceOf(op)}},
			"message": "insufficient permissions",
			"type":    "permissions_denied",
		}
	case http.StatusNotFound:
		return map[string]any{"message": "resource is not found", "resource": resourceOf(op), "type": "not_found"}
	case http.StatusConflict:
		return map[string]any{
			"current_state": "pending",
			"message":       "resource is in a transient state",
			"resource":      resourceOf(op),
			"type":          "transient_state",
		}
	case http.StatusPreconditionFailed:
		return preconditionErr(preconditionNotUsable, "injected precondition failure").body
	case http.StatusInternalServerError:
		return serverErrorBody()
	}
	text := http.StatusText(status)
	if text == "" {
		text = fmt.Sprintf("HTTP %d", status)
	}
	return map[string]any{"message": text}
}
