Feature: Projection from a graph stored in a SQLite file
  Graphs are written as interchange JSON Lines, imported into the
  scenario's temp-file store and projected from its tables after reopening.

  Background:
    Given graph nodes imported from JSON Lines:
      | uri | view0 | view4            | view9                          |
      | A   | A     | class A(Base)    | class A(Base):\n  def a(): ... |
      | B   | B     | class B(Base)    | class B(Base):\n  def b(): ... |
      | C   | C     | class C(Base)    | class C(Base):\n  def c(): ... |
      | D   | D     | class D(Base)    | class D(Base):\n  def d(): ... |
      | X   | X     | class X(Base)    | class X(Base):\n  def x(): ... |
      | H   | H     | hub H            | hub H with many children       |
      | H1  | H1    | leaf H1          | leaf H1 source                 |
      | H2  | H2    | leaf H2          | leaf H2 source                 |
      | H3  | H3    | leaf H3          | leaf H3 source                 |
      | H4  | H4    | leaf H4          | leaf H4 source                 |
      | H5  | H5    | leaf H5          | leaf H5 source                 |
    And graph edges imported from JSON Lines:
      | source | target | relation |
      | A      | B      | contains |
      | B      | C      | contains |
      | C      | D      | imports  |
      | X      | C      | imports  |
      | B      | A      | calls    |
      | A      | A      | calls    |
      | H      | H1     | contains |
      | H      | H2     | contains |
      | H      | H3     | contains |
      | H      | H4     | contains |
      | H      | H5     | contains |

  Scenario: Several focus nodes keep each node's smallest distance
    When I project focus "A X" with breadth 3 and depth 9
    Then the projection is "A:0:9 X:0:9 B:1:6 C:1:6 D:2:3"

  Scenario: Cycles and self-loops end the walk
    When I project focus "A" with breadth 10 and depth 10
    Then the projection is "A:0:10 B:1:9 C:2:8 D:3:7"

  Scenario: A focus that is not in the graph is a clear error
    When I project focus "A class://Ghost" with breadth 1 and depth 9
    Then the projection fails with "unknown UKO node class://Ghost"

  Scenario: Incoming edges are followed backwards
    When I project focus "C" with breadth 2 and depth 4 following incoming edges
    Then the projection is "C:0:4 B:1:2 X:1:2 A:2:0"

  Scenario: Both directions
    When I project focus "C" with breadth 1 and depth 4 following both edges
    Then the projection is "C:0:4 B:1:0 D:1:0 X:1:0"

  Scenario: A relation filter follows only the named relations
    When I project focus "X" with breadth 3 and depth 9 following only "imports"
    Then the projection is "X:0:9 C:1:6 D:2:3"

  Scenario: Fragment content is the view at the resolved depth
    When I project fragments for focus "A" with breadth 2 and depth 9
    Then the fragment of "A" has content "class A(Base):\n  def a(): ..." at depth 9
    And the fragment of "B" has content "class B(Base)" at depth 4
    And the fragment of "C" has content "C" at depth 0
    And every fragment's tokens are the tokenizer's count of its content

  # A's view takes 9 tokens, B's 4 and C's 1 (cl100k_base).
  Scenario: A token budget keeps the nearest fragments that fit
    When I project fragments for focus "A" with breadth 2 and depth 9 within 13 tokens
    Then the fragments are "A B"
    And the dropped fragments are "C"
    And the fragments take at most 13 tokens

  Scenario: A fragment too large for what is left is skipped, and smaller ones still fit
    When I project fragments for focus "A" with breadth 2 and depth 9 within 12 tokens
    Then the fragments are "A C"
    And the dropped fragments are "B"
    And the fragments take at most 12 tokens

  Scenario: Without a fan-out cap a hub brings in all its neighbours
    When I project focus "H" with breadth 1 and depth 4
    Then the projection has 6 nodes

  Scenario: A fan-out cap limits what one hub brings in and says so
    When I project focus "H" with breadth 1 and depth 4 and at most 2 neighbours per node
    Then the projection is "H:0:4 H1:1:0 H2:1:0"
    And the projection reports 3 neighbours of "H" cut

  Scenario: The store and the in-memory graph project the same nodes
    When I compare projections of the stored and the in-memory graph from every node with breadth 0 to 3 in every direction
    Then they are equal
