package sql

// functionsRelease numbers the contents of sql/functions. Raise it, and set
// functionsSum to what TestFunctionsReleaseFollowsTheFiles prints, whenever a
// function file changes. A database records the release its functions come
// from, and Migrate never replaces them with an older release's: in a rolling
// deploy, an older build that starts after a newer one keeps the newer
// functions (a function's signature never changes without a migration, which
// an older build refuses, so they serve it too).
const functionsRelease = 8

// functionsSum is the SHA-256 of the function files of functionsRelease (see
// functionsChecksum).
const functionsSum = "8b8911a631b34626ea5027bee506a7174a04dbfb7364d8717314cb9a0a21e722"
