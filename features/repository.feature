Feature: Decision repository on a SQLite file
  Every scenario writes to its own temp-file store, closes it, and opens
  the file again before it reads anything back.

  A plan keeps its model at every write: one root, its prompt_definition;
  a correction or supersession overturns the decision that stands now.

  The history plan used below is:
    R  prompt_definition, sequence 0, the root
    A  strategy_choice, sequence 1, under R
    A2 corrects A, sequence 2, under R
    A3 corrects A2, sequence 3, under R
    B  tool_invocation, sequence 4, under R, superseded by C
    C  tool_invocation, sequence 5, under R

  Scenario: Every decision shape of the seed scenarios round-trips through the store
    Given a stored plan with every decision shape of the seed scenarios
    When I reopen the store
    Then every decision reads back equal to what was stored
    And the plan lists its decisions in sequence order

  Scenario: A correction chain of 3 is rebuilt from stored rows
    Given a stored history plan
    When I reopen the store
    Then the correction chain of A, A2 and A3 is each "A A2 A3"
    And the decision that stands for A is A3
    And the decision that stands for B is C
    And the decision that stands for R is R

  Scenario: A 3-level tree of 7 decisions is rebuilt from stored rows
    Given a stored 3-level decision tree of 7 decisions
    When I reopen the store
    Then the tree has 1 root, 7 decisions and depth 2
    And each decision's children come in sequence order
    And every leaf's path to the root has 3 decisions
    And the root's subtree holds all 7 decisions and its descendants 6

  Scenario: Supersession is recorded once and survives reopening
    Given a stored history plan
    When A3 is superseded by C
    And I reopen the store
    Then A3 reads back superseded by C
    And recording that A3 is superseded by C again changes nothing
    And superseding A3 by R is refused with "already superseded"

  Scenario: The effective decisions are those nothing corrects or supersedes
    Given a stored history plan
    When I reopen the store
    Then the effective decisions of the plan are "R A3 C"

  Scenario Outline: A rejected write leaves the store exactly as it was
    Given a stored history plan
    And a second stored plan
    When I attempt to <write>
    Then the write is refused with "<message>"
    And after reopening, the store holds exactly the rows it held before

    Examples:
      | write                                                    | message                            |
      | insert a decision whose parent is not stored             | no such decision in plan           |
      | insert a decision whose parent is in the second plan     | belongs to plan                    |
      | insert a correction of a decision that is not stored     | no such decision in plan           |
      | insert a correction of a decision in the second plan     | belongs to plan                    |
      | insert a decision at the sequence of A                   | already has a decision at sequence |
      | insert a different decision under the id of A            | already exists                     |
      | supersede A by a decision that is not stored             | no such decision in plan           |
      | supersede A by a decision of the second plan             | belongs to plan                    |
      | supersede C by B                                         | cycle                              |
      | supersede A3 by A                                        | cycle                              |
      | supersede A by A3 after A3 is superseded by A            | cycle                              |
      | update a decision row with SQL                           | append-only                        |
      | delete a decision row with SQL                           | append-only                        |
      | delete a supersession row with SQL                       | append-only                        |
      | correct A2, which A3 corrected                           | correct the decision that stands now, A3 |
      | correct B, which C superseded                            | correct the decision that stands now, C |
      | supersede A2, which A3 corrected                         | supersede the decision that stands now, A3 |
      | insert a second prompt_definition as a root of the plan  | has its prompt_definition already  |
      | insert a strategy_choice without a parent into the plan  | parent_decision_id: is required    |
      | insert a strategy_choice without a parent into a new plan | invalid plan_id: no plan          |

  Scenario: A batch is stored whole or not at all
    Given a stored history plan
    When I insert a batch of 5 new decisions whose third names a missing parent
    Then the write is refused with "item 2"
    And after reopening, the store holds exactly the rows it held before
    When I insert the same batch without its third decision
    Then after reopening, the plan holds 10 decisions

  Scenario Outline: Files that are not decision stores are refused and left untouched
    Given a file holding <content>
    When I open it read-only
    Then opening fails with "<read-only>"
    And the file is unchanged
    When I open it for writing
    Then opening <writable>

    Examples:
      | content                                  | read-only                  | writable                              |
      | random bytes                             | not a SQLite database      | fails with "not a SQLite database"    |
      | a SQLite database of another application | not a decision store       | fails with "not a decision store"     |
      | a store with a newer schema version      | newer than this library    | fails with "newer than this library"  |
      | nothing (0 bytes)                        | no decision store here yet | creates an empty store                |
