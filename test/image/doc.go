// Package image tests the Tabby image make image builds
// (hack/imagebuild): built twice to the same digest, imported into a
// private containerd in a network namespace of the test's own, and run,
// so every binary of the image and the libraries and plugins it loads are
// proven to work inside it (image_privileged_test.go).
package image
