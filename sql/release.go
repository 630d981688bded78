package sql

// functionsRelease numbers the contents of sql/functions. Raise it, and set
// functionsSum to what TestFunctionsReleaseFollowsTheFiles prints, whenever a
// function file changes. A database records the release its functions come
// from, and Migrate never replaces them with an older release's: in a rolling
// deploy, an older build that starts after a newer one keeps the newer
// functions (a function's signature never changes without a migration, which
// an older build refuses, so they serve it too).
const functionsRelease = 7

// functionsSum is the SHA-256 of the function files of functionsRelease (see
// functionsChecksum).
const functionsSum = "b2c552abe22ec05a42a539ebf71b6a09c4c5813e4a79a9a94eb4a98352f029da"
