package github

import (
	"encoding/json"
	"net/http"
	"strconv"
)

const (
	docsREST           = "https://docs.github.com/rest"
	docsPrimaryLimit   = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-the-primary-rate-limit"
	docsSecondaryLimit = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"
)

// Messages GitHub answers with, shared by handlers and tests.
const (
	msgNotFound         = "Not Found"
	msgBadCredentials   = "Bad credentials"
	msgRequiresAuth     = "Requires authentication"
	msgJWTDecode        = "A JSON web token could not be decoded"
	msgJWTExpired       = "'Expiration time' claim ('exp') must be a numeric value representing the future time at which the assertion expires"
	msgJWTTooFar        = "'Expiration time' claim ('exp') is too far in the future"
	msgJWTIssuedAt      = "'Issued at' claim ('iat') must be an Integer representing the time that the assertion was issued"
	msgIntegration      = "Resource not accessible by integration"
	msgPATScope         = "Resource not accessible by personal access token"
	msgParseJSON        = "Problems parsing JSON"
	msgValidationFailed = "Validation Failed"
	msgServerError      = "Server Error"
)

// apiError is an error answer in GitHub's shape.
type apiError struct {
	Message          string   `json:"message"`
	Errors           []string `json:"errors,omitempty"`
	DocumentationURL string   `json:"documentation_url"`
	Status           string   `json:"status"`

	code   int
	header map[string]string
	// body, when set, is written instead (the Actions service's exception shape).
	body any
}

func newError(code int, msg string) *apiError {
	return &apiError{Message: msg, DocumentationURL: docsREST, Status: strconv.Itoa(code), code: code}
}

func errNotFound() *apiError { return newError(http.StatusNotFound, msgNotFound) }

// errValidation is GitHub's "Validation Failed" answer in its simple shape, the one
// the runner endpoints document (validation-error-simple): errors are strings.
func errValidation(msg string) *apiError {
	e := newError(http.StatusUnprocessableEntity, msgValidationFailed)
	e.Errors = []string{msg}
	return e
}

// errInvalid is GitHub's answer to a body that parses but breaks the schema.
func errInvalid(detail string) *apiError {
	return newError(http.StatusUnprocessableEntity, "Invalid request.\n\n"+detail)
}

func (e *apiError) write(w http.ResponseWriter) {
	for k, v := range e.header {
		w.Header().Set(k, v)
	}
	if e.body != nil {
		writeJSON(w, e.code, e.body)
		return
	}
	writeJSON(w, e.code, e)
}

func writeError(w http.ResponseWriter, code int, msg string) { newError(code, msg).write(w) }

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"message":"Server Error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
