package scaleway

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"syscall"

	"github.com/scaleway/scaleway-sdk-go/scw"
)

// Kind is what a failed Scaleway call means for the caller.
type Kind int

const (
	// KindOther is an error this package has no specific answer for.
	KindOther Kind = iota
	// KindNotFound: the IP or Private Network does not exist.
	KindNotFound
	// KindAddressTaken: the requested address is already booked.
	KindAddressTaken
	// KindExhausted: the subnet has no free address left.
	KindExhausted
	// KindUnavailable: rate limited, server error, connection failure or
	// timeout; worth retrying later.
	KindUnavailable
	// KindPermissionDenied: the key's IAM application lacks the permission
	// set the call needs in the Project it touched (403).
	KindPermissionDenied
	// KindUnauthenticated: the API does not know the key: unknown,
	// revoked or expired (401).
	KindUnauthenticated
	// KindInvalid: the API rejected the request's arguments.
	KindInvalid
)

func (k Kind) String() string {
	switch k {
	case KindNotFound:
		return "not found"
	case KindAddressTaken:
		return "address already taken"
	case KindExhausted:
		return "subnet exhausted"
	case KindUnavailable:
		return "unavailable"
	case KindPermissionDenied:
		return "permission denied"
	case KindUnauthenticated:
		return "key refused"
	case KindInvalid:
		return "invalid request"
	default:
		return "other"
	}
}

// Classify maps an error from scaleway-sdk-go to a Kind. The SDK turns most
// error bodies into typed errors chosen by the body's "type", and those carry
// no HTTP status; the rest arrive as *scw.ResponseError with a status code.
// Both are handled here so callers never look at either.
func Classify(err error) Kind {
	if err == nil {
		return KindOther
	}
	var (
		notFound    *scw.ResourceNotFoundError
		denied      *scw.PermissionsDeniedError
		unauth      *scw.DeniedAuthenticationError
		outOfStock  *scw.OutOfStockError
		quota       *scw.QuotasExceededError
		transient   *scw.TransientStateError
		locked      *scw.ResourceLockedError
		invalidArgs *scw.InvalidArgumentsError
		precond     *scw.PreconditionFailedError
		resp        *scw.ResponseError
	)
	switch {
	case errors.As(err, &notFound):
		return KindNotFound
	case errors.As(err, &denied):
		return KindPermissionDenied
	case errors.As(err, &unauth):
		return KindUnauthenticated
	case errors.As(err, &outOfStock), errors.As(err, &quota):
		return KindExhausted
	case errors.As(err, &transient), errors.As(err, &locked):
		return KindUnavailable
	case errors.As(err, &invalidArgs), errors.As(err, &precond):
		return KindInvalid
	case errors.As(err, &resp):
		return classifyStatus(resp)
	}
	if isConnectionError(err) {
		return KindUnavailable
	}
	return KindOther
}

func classifyStatus(resp *scw.ResponseError) Kind {
	switch {
	case resp.Type == "already_exists":
		return KindAddressTaken
	case resp.Type == "out_of_stock":
		return KindExhausted
	case resp.StatusCode == http.StatusNotFound:
		return KindNotFound
	case resp.StatusCode == http.StatusUnauthorized:
		return KindUnauthenticated
	case resp.StatusCode == http.StatusForbidden:
		return KindPermissionDenied
	case resp.StatusCode == http.StatusConflict:
		// A 409 that is not already_exists is a transient state of the resource.
		return KindUnavailable
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode >= 500:
		return KindUnavailable
	case resp.StatusCode >= 400:
		return KindInvalid
	}
	return KindOther
}

// isConnectionError reports failures to get any answer: refused or reset
// connections, a closed connection mid-response, and timeouts.
func isConnectionError(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, context.DeadlineExceeded)
}

// retryable reports whether a call may be sent again as it is. Everything
// Unavailable qualifies for idempotent calls; see Cloud.BookIP for bookings.
func retryable(err error) bool {
	return Classify(err) == KindUnavailable
}

// definitelyNotCommitted reports failures after which a booking certainly did
// not happen: the request was refused before the server acted on it.
func definitelyNotCommitted(err error) bool {
	var resp *scw.ResponseError
	if errors.As(err, &resp) && resp.StatusCode == http.StatusTooManyRequests {
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
