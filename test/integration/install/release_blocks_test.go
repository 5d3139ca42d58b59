package install

// releaseBlocks are the blocks marked `<!-- release: ID -->`: `make release-dry-run`'s
// rehearsal (release_test.go, built with the tag release) runs each, as written, with
// the dry run's files where a download would put them. TestDocsBlocksAreMarked checks
// this list against the docs.
var releaseBlocks = []string{
	install + "verify-signature",
	install + "verify-files",
	install + "crds",
	install + "upgrade-crds",
}
