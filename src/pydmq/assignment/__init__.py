"""Server-side partition assignors of the consumer group protocol (KIP-848)."""

from pydmq.assignment.api import (
    AssignmentSpec,
    GroupAssignor,
    GroupAssignorSpec,
    InvalidAssignmentError,
    MemberAssignment,
    MemberSubscription,
    TopicMetadata,
    validate_assignment,
)
from pydmq.assignment.range import RangeAssignor
from pydmq.assignment.uniform import UniformAssignor

__all__ = [
    "AssignmentSpec",
    "GroupAssignor",
    "GroupAssignorSpec",
    "InvalidAssignmentError",
    "MemberAssignment",
    "MemberSubscription",
    "RangeAssignor",
    "TopicMetadata",
    "UniformAssignor",
    "validate_assignment",
]
