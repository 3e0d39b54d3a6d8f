package commands

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

var zeroTime metav1.Time
